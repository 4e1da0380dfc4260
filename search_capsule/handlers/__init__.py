"""Request handlers: each gathers what its page needs (off the event loop) and renders it."""

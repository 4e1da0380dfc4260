"""Stage 3: index + store (read-only) → Gemini clients, through a TLS search capsule."""

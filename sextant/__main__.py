from sextant.cli import main

main()

from openheim.cli import main

main()

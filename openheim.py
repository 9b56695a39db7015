from openheim.__main__ import main

main()

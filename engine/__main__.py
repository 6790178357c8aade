import sys

from engine.cli.app import main

sys.exit(main())

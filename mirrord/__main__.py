import sys

from mirrord.cli import main

sys.exit(main())

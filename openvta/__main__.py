import sys

from openvta.cli import main

sys.exit(main())

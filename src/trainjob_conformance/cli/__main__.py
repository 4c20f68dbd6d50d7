import sys

from trainjob_conformance.cli.main import main

sys.exit(main())

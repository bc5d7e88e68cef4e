import sys

from rnnviz.cli.main import main

sys.exit(main())

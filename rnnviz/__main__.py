import sys

from rnnviz.cli import main

sys.exit(main())

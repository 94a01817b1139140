import sys

from parallel_experts.cli import main

sys.exit(main())

"""How the tests start the suite's command line: the interpreter running them, so the installed
package under test is the one the command imports."""

import sys

CLI = (sys.executable, "-m", "nats_conformance.harness.cli")

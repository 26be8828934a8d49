"""How gpuwatch reaches hosts: the local transport and one SSH session per host (asyncssh lives only here)."""

import warnings

# asyncssh still names DSA key classes, which newer cryptography releases warn about at import: nothing a
# person running gpuwatch can act on, printed above every headless verb's output.
warnings.filterwarnings("ignore", message="DSA is deprecated", module=r"asyncssh\.")

"""The package version, in a module of its own.

Modules inside the package (the session's ``clientInfo``, ``agenthost --version``) read it
from here rather than from ``agenthost/__init__``, whose lazy exports name every layer:
importing the package root from inside a layer would be an import circle
(tests/test_layers.py).
"""

__all__ = ["__version__"]

__version__ = "0.1.0"

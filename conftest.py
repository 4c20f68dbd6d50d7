"""Root conftest: the harness plugin itself is loaded through its pytest11 entry point.

pytester is enabled for the unit tests of the plugin's own logic.
"""

pytest_plugins = ["pytester"]

"""A stand-in for the ``sglang`` package in the launch tests (see ``launch_server``)."""

"""devicekit-ray: the devices of a Ray cluster's nodes as devicekit devices (kind RAY). Nothing heavy here: the
entry point (plugin.py) imports this package whenever devices are listed."""

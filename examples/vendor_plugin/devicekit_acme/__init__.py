"""devicekit-acme: the ACME device for devicekit. Importing the package imports nothing heavy; devicekit finds the
device through the entry point `devicekit_acme.plugin`."""

__version__ = "0.1.0"

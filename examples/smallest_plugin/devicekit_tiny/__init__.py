"""devicekit-tiny: the smallest complete devicekit plugin (docs/writing-a-plugin.md, "The smallest plugin")."""

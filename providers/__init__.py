"""Cloud provider adapters. Nothing here is imported until a command needs it:
see registry.py."""

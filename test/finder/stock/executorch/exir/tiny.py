"""A module that the fixture series changes."""


def read(device):
    return f"read on {device}"

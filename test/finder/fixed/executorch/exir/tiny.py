"""A module that the fixture series changes."""


def read(device):
    if device != "cpu":
        raise RuntimeError(f"data on {device} cannot be read here")
    return f"read on {device}"

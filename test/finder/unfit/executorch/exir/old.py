"""A module that a backport changes, for releases 1.0.0 to 1.4.1 only."""


def read(device):
    return f"old read on {device}"

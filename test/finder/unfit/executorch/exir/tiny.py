"""A module that the fixture series changes, edited by its user."""


def read(device):
    return f"{device} read"

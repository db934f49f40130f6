"""torch.cuda of the stand-in (tests/install/fake_torch): one pretend device."""


class nccl:
    @staticmethod
    def version():
        return (0, 0, 0)


def is_available():
    return True


def set_device(dev):
    pass


def get_device_name(dev=None):
    return "fake device (tests/install/fake_torch)"


def device_count():
    return 1


def synchronize(dev=None):
    pass

"""What can go wrong, as exceptions a training script can catch by kind."""


class NetReduceError(RuntimeError):
    """An all-reduce through the appliance could not be done; no result was written into the tensor."""


class SetupError(NetReduceError):
    """The session could not be set up (sidecar, rendezvous, ring parameters, appliance)."""


class RingMismatch(SetupError):
    """The ring on the appliance is missing or its parameters differ from this session's."""


class ApplianceUnreachable(SetupError):
    """The appliance's control API could not be asked."""


class TransportError(NetReduceError):
    """The transport failed a call (a connection failed, a result arrived unaggregated, a timeout)."""

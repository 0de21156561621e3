package io.netreduce.controlplane.config;

import java.io.IOException;
import java.io.UncheckedIOException;

/**
 * The daemon could not start because of what its configuration says (a listen path it cannot bind, an address this
 * host does not have, a token file others can read): starting again will not help, so the daemon exits with the
 * configuration's status (2, the systemd unit's {@code RestartPreventExitStatus}) rather than 1. A failure that may
 * pass (an address in use) is not one of these.
 */
public final class ConfigFaultException extends UncheckedIOException
{
    public ConfigFaultException(final String message, final IOException cause)
    {
        super(message, cause);
    }
}

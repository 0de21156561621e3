package io.netreduce.controlplane.config;

/**
 * Checks that depend on the host rather than on the document.
 *
 * @param checkInterfaces whether every {@code appliance.ports[].name} must be an interface of this host. Off for
 *                        tests and offline checks of a configuration meant for another machine; the daemon turns
 *                        it on.
 */
public record ValidationOptions(boolean checkInterfaces)
{
    /** Document checks only. */
    public static final ValidationOptions DOCUMENT_ONLY = new ValidationOptions(false);
    /** Document checks plus the host's interfaces, as the daemon runs them. */
    public static final ValidationOptions ON_THIS_HOST = new ValidationOptions(true);
}

package io.netreduce.protocol.pcap;

import java.io.IOException;

/**
 * A pcap file could not be opened, read or written: the message names the file and, when reading, the record
 * at which it went wrong, so a command can print it as it is.
 */
public final class PcapException extends IOException
{
    private static final long serialVersionUID = 1L;

    public PcapException(final String message)
    {
        super(message);
    }

    public PcapException(final String message, final Throwable cause)
    {
        super(message, cause);
    }
}

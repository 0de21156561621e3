package io.netreduce.host.rc;

/**
 * Per queue pair counters. Written only by the endpoint's duty-cycle thread; other threads may read them for
 * reporting (plain fields: a reader sees a recent value, not necessarily the latest).
 */
public final class QpCounters
{
    long packetsSent;
    long bytesSent;
    long packetsReceived;
    long bytesReceived;
    long retransmittedPackets;
    long naksSent;
    long naksReceived;
    long rnrNaksSent;
    long rnrNaksReceived;
    long acksSent;
    long acksReceived;
    long duplicates;
    long outOfSequence;
    long icrcErrors;
    long timeouts;
    long cnpsSent;
    long cnpsReceived;
    long ecnMarked;
    long sendDrops;
    long receiveDrops;
    long completionQueueFull;
    long transmitRingFull;

    /** Packets sent, including retransmissions, ACKs, NAKs and CNPs (dropped-by-injector ones excluded). */
    public long packetsSent()
    {
        return packetsSent;
    }

    /** Payload bytes of request packets sent (retransmissions included). */
    public long bytesSent()
    {
        return bytesSent;
    }

    /** Packets received for this queue pair with a good ICRC. */
    public long packetsReceived()
    {
        return packetsReceived;
    }

    /** Payload bytes placed by the responder (duplicates excluded). */
    public long bytesReceived()
    {
        return bytesReceived;
    }

    public long retransmittedPackets()
    {
        return retransmittedPackets;
    }

    public long naksSent()
    {
        return naksSent;
    }

    public long naksReceived()
    {
        return naksReceived;
    }

    public long rnrNaksSent()
    {
        return rnrNaksSent;
    }

    public long rnrNaksReceived()
    {
        return rnrNaksReceived;
    }

    public long acksSent()
    {
        return acksSent;
    }

    public long acksReceived()
    {
        return acksReceived;
    }

    /** Request packets with a PSN below the expected PSN (re-ACKed, not re-applied). */
    public long duplicates()
    {
        return duplicates;
    }

    /** Request packets with a PSN above the expected PSN (dropped; the first of a gap is NAKed). */
    public long outOfSequence()
    {
        return outOfSequence;
    }

    public long icrcErrors()
    {
        return icrcErrors;
    }

    public long timeouts()
    {
        return timeouts;
    }

    public long cnpsSent()
    {
        return cnpsSent;
    }

    public long cnpsReceived()
    {
        return cnpsReceived;
    }

    /** Request packets that arrived with ECN = CE. */
    public long ecnMarked()
    {
        return ecnMarked;
    }

    /** Packets this queue pair's sends lost to the fault injector. */
    public long sendDrops()
    {
        return sendDrops;
    }

    /** Packets for this queue pair lost to the fault injector on receive. */
    public long receiveDrops()
    {
        return receiveDrops;
    }

    public long completionQueueFull()
    {
        return completionQueueFull;
    }

    /** Times the port refused a frame (transmit ring full); the frame is retried later. */
    public long transmitRingFull()
    {
        return transmitRingFull;
    }

    @Override
    public String toString()
    {
        return "packetsSent=" + packetsSent + " bytesSent=" + bytesSent + " packetsReceived=" + packetsReceived +
            " bytesReceived=" + bytesReceived + " retransmitted=" + retransmittedPackets + " naksSent=" + naksSent +
            " naksReceived=" + naksReceived + " rnrNaksSent=" + rnrNaksSent + " rnrNaksReceived=" +
            rnrNaksReceived + " acksSent=" + acksSent + " acksReceived=" + acksReceived + " duplicates=" +
            duplicates + " outOfSequence=" + outOfSequence + " icrcErrors=" + icrcErrors + " timeouts=" +
            timeouts + " cnpsSent=" + cnpsSent + " cnpsReceived=" + cnpsReceived + " ecnMarked=" + ecnMarked +
            " sendDrops=" + sendDrops + " receiveDrops=" + receiveDrops + " cqFull=" + completionQueueFull +
            " txRingFull=" + transmitRingFull;
    }
}

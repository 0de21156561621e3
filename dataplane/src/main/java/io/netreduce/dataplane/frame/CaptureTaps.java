package io.netreduce.dataplane.frame;

import io.netreduce.dataplane.capture.CaptureTap;
import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.counters.DataplaneCounters;
import io.netreduce.protocol.port.PacketPort;
import org.agrona.concurrent.status.AtomicCounter;

/**
 * The capture taps installed on the dataplane: at most one per port (frames as received) and one for drops
 * (dropped frames with their reason). Installed and removed between batches by commands; looked at once per
 * frame and once per drop, a null check when no tap runs.
 */
public final class CaptureTaps
{
    private final PacketPort[] ports;
    private final CaptureTap[] portTaps;
    private final AtomicCounter captured;
    private final AtomicCounter captureLost;
    private CaptureTap dropTap;

    public CaptureTaps(final PacketPort[] ports, final DataplaneCounters counters)
    {
        this.ports = ports;
        this.portTaps = new CaptureTap[ports.length];
        this.captured = counters.counter(DataplaneCounter.CAPTURED);
        this.captureLost = counters.counter(DataplaneCounter.CAPTURE_LOST);
    }

    /**
     * Show the frame in hand to its port's tap, if one runs: before anything else touches it, so the capture
     * shows the frame as received (before a checksum is completed or a tag rewritten).
     */
    public void onArrival(final ArrivingFrame arriving)
    {
        final CaptureTap tap = portTaps[arriving.port()];
        if (tap != null)
        {
            offer(tap, arriving, CaptureTap.NO_REASON);
        }
    }

    /**
     * Show the frame in hand, being dropped for {@code reason}, to the drop tap, if one runs.
     */
    public void onDrop(final ArrivingFrame arriving, final DataplaneCounter reason)
    {
        final CaptureTap tap = dropTap;
        if (tap != null && tap.acceptsPort(arriving.port()))
        {
            offer(tap, arriving, reason.ordinal());
        }
    }

    private void offer(final CaptureTap tap, final ArrivingFrame arriving, final int reason)
    {
        if (tap.offer(arriving.buffer(), arriving.offset(), arriving.length(), arriving.port(), reason,
            arriving.batchNs()))
        {
            captured.incrementRelease();
        }
        else
        {
            captureLost.incrementRelease();
        }
    }

    /**
     * @throws IllegalArgumentException if the tap's port does not exist, is already tapped, drops are already
     *                                  tapped, or a tap with the same id is installed.
     */
    public void install(final CaptureTap tap)
    {
        if (tap.port() >= ports.length)
        {
            throw new IllegalArgumentException("capture " + tap.id() + ": no port " + tap.port() + " (" +
                ports.length + " ports)");
        }
        if (find(tap.id()) != null)
        {
            throw new IllegalArgumentException("capture " + tap.id() + " is already installed");
        }
        if (tap.drops())
        {
            if (dropTap != null)
            {
                throw new IllegalArgumentException("drops are already captured by capture " + dropTap.id());
            }
            dropTap = tap;
        }
        else
        {
            if (portTaps[tap.port()] != null)
            {
                throw new IllegalArgumentException("port " + ports[tap.port()].name() +
                    " is already captured by capture " + portTaps[tap.port()].id());
            }
            portTaps[tap.port()] = tap;
        }
    }

    /**
     * @return the removed tap.
     * @throws IllegalArgumentException if no tap has that id.
     */
    public CaptureTap remove(final int captureId)
    {
        final CaptureTap tap = find(captureId);
        if (tap == null)
        {
            throw new IllegalArgumentException("no capture " + captureId + " is installed");
        }
        if (tap == dropTap)
        {
            dropTap = null;
        }
        else
        {
            portTaps[tap.port()] = null;
        }
        return tap;
    }

    private CaptureTap find(final int captureId)
    {
        if (dropTap != null && dropTap.id() == captureId)
        {
            return dropTap;
        }
        for (final CaptureTap tap : portTaps)
        {
            if (tap != null && tap.id() == captureId)
            {
                return tap;
            }
        }
        return null;
    }
}

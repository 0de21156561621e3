package io.netreduce.worker;

import io.netreduce.host.allreduce.RingWarmUp;
import io.netreduce.host.rc.RcConfig;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.port.AfPacketConfiguration;
import io.netreduce.protocol.port.AfPacketPort;
import io.netreduce.protocol.port.PacketPort;

import java.io.PrintStream;

/**
 * A ring's warm-up on {@value RingWarmUp#PORT_RANKS} AF_PACKET ports of one interface (the loopback interface) with a
 * real ring's port settings: the real port's code (its rings, the segmentation offload's batches and their split) is
 * compiled with the rest of the packet path, and every call site sees the port class the real ring will. A warm-up
 * on memory ports compiles the RC and ring code but not the port's, and C2 compiles a hot method with its callees
 * inlined: the real port's loops were compiled in the first call whatever else was warm (docs/performance.md, "The
 * sidecar agent"). The agent's start warm-up, and {@code worker allreduce}'s.
 */
final class LoopbackWarmUp
{
    private LoopbackWarmUp()
    {
    }

    /**
     * Open the ports and run the warm-up; the ports are closed when it ends, whatever happened.
     *
     * @param ports        the settings of each of the three ports (the interface's name among them).
     * @param areaMessages messages of the placed input and output areas, as a session's (0: slot mode, as
     *                     {@code worker allreduce}'s).
     * @param who          what its lines on {@code log} begin with ("agent: start", "allreduce: rank 3").
     * @return what it did (its failure, if it had one, in the report), or null where it could not run (the ports
     *         refused: the interface missing, no rights; or the warm-up threw), having said why on {@code log}.
     */
    static RingWarmUp.Report run(final AfPacketConfiguration ports, final RcConfig rc, final int window,
        final int msgLen, final ElementType type, final int areaMessages, final long frames, final long maxNanos,
        final String who, final PrintStream log)
    {
        final String dev = ports.interfaceName();
        final PacketPort[] trio = new PacketPort[RingWarmUp.PORT_RANKS];
        try
        {
            for (int r = 0; r < trio.length; r++)
            {
                trio[r] = AfPacketPort.open(ports);
            }
        }
        catch (final RuntimeException ex)
        {
            for (final PacketPort port : trio)
            {
                if (port != null)
                {
                    port.close();
                }
            }
            log.println(who + " warm-up: not on " + dev + " (" + ex.getMessage() + ")");
            return null;
        }
        try (RingWarmUp warmUp = RingWarmUp.onPorts(trio, rc, window, msgLen, type, areaMessages, frames))
        {
            final RingWarmUp.Report report = warmUp.run(frames, maxNanos);
            log.println(who + " warm-up on " + dev + ": " + report);
            return report;
        }
        catch (final RuntimeException ex)
        {
            log.println(who + " warm-up on " + dev + " failed: " + ex.getMessage());
            return null;
        }
    }
}

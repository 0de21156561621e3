package io.netreduce.protocol.port;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The running Linux kernel's release, for features a port depends on that the kernel does not otherwise announce.
 */
public record KernelRelease(int major, int minor)
{
    private static final Pattern RELEASE = Pattern.compile("^(\\d+)\\.(\\d+)");
    private static final KernelRelease CURRENT = parse(System.getProperty("os.version", ""));

    /**
     * @return the running kernel's release (from the JVM's {@code os.version}, the kernel's {@code uname -r}); 0.0
     *         when it cannot be read.
     */
    public static KernelRelease current()
    {
        return CURRENT;
    }

    /**
     * @param release a kernel release as {@code uname -r} prints it ("6.1.0-50-amd64", "6.18.44-fc-v657").
     */
    public static KernelRelease parse(final String release)
    {
        final Matcher matcher = RELEASE.matcher(release);
        return matcher.find() ? new KernelRelease(Integer.parseInt(matcher.group(1)),
            Integer.parseInt(matcher.group(2))) : new KernelRelease(0, 0);
    }

    public boolean atLeast(final int wantedMajor, final int wantedMinor)
    {
        return major > wantedMajor || (major == wantedMajor && minor >= wantedMinor);
    }

    /**
     * Whether packet sockets carry UDP segmentation (USO, VIRTIO_NET_HDR_GSO_UDP_L4) in their virtio-net headers:
     * Linux 6.2 and later. Before it the kernel refuses such a header on send and drops a UDP-segmented frame it
     * would hand a receiving packet socket with one (it cannot describe it), so a port with segmentation offload
     * loses every batch it sends to a local receiver (on the loopback interface, a veth): found on Debian 12's 6.1,
     * where an agent's start warm-up on lo retransmitted until it gave up.
     */
    public boolean packetSocketsSegmentUdp()
    {
        return atLeast(6, 2);
    }

    /**
     * @return what to tell the operator when a port asked for segmentation offload opened without it on this kernel,
     *         or null when it has it (or was not asked).
     */
    public static String offloadNote(final String interfaceName, final boolean asked, final boolean opened)
    {
        return asked && !opened ? "port " + interfaceName + ": segmentation offload off: packet sockets segment UDP " +
            "from Linux 6.2, this kernel is " + current() + " (frames go one by one)" : null;
    }

    @Override
    public String toString()
    {
        return major + "." + minor;
    }
}

package io.netreduce.protocol.port;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

class KernelReleaseTest
{
    @Test
    void shouldReadTheReleaseAsUnamePrintsIt()
    {
        assertThat(KernelRelease.parse("6.1.0-50-amd64")).isEqualTo(new KernelRelease(6, 1));
        assertThat(KernelRelease.parse("6.18.44-fc-v657")).isEqualTo(new KernelRelease(6, 18));
        assertThat(KernelRelease.parse("5.15.0")).isEqualTo(new KernelRelease(5, 15));
        assertThat(KernelRelease.parse("")).isEqualTo(new KernelRelease(0, 0));
        assertThat(KernelRelease.parse("unknown")).isEqualTo(new KernelRelease(0, 0));
    }

    @Test
    void shouldTakeUdpSegmentationInPacketSocketsFromLinux62On()
    {
        // Debian 12's kernel refused it (the systemd-agent interop scenario), the bed's carries it
        assertThat(KernelRelease.parse("6.1.0-50-amd64").packetSocketsSegmentUdp()).isFalse();
        assertThat(KernelRelease.parse("5.19.17").packetSocketsSegmentUdp()).isFalse();
        assertThat(KernelRelease.parse("6.2.0").packetSocketsSegmentUdp()).isTrue();
        assertThat(KernelRelease.parse("6.18.44-fc-v657").packetSocketsSegmentUdp()).isTrue();
        assertThat(KernelRelease.parse("7.0.1").packetSocketsSegmentUdp()).isTrue();
    }

    @Test
    void shouldNoteOnlyAnOffloadAskedForAndNotGot()
    {
        assertThat(KernelRelease.offloadNote("eth0", true, true)).isNull();
        assertThat(KernelRelease.offloadNote("eth0", false, false)).isNull();
        assertThat(KernelRelease.offloadNote("eth0", true, false)).startsWith("port eth0: segmentation offload off")
            .contains("Linux 6.2", "this kernel is " + KernelRelease.current());
    }

    @Test
    void shouldOpenAPortWithOffloadOnlyWhereTheRunningKernelSegmentsUdp()
    {
        final AfPacketConfiguration asked = AfPacketConfiguration.defaults("lo").withSegmentationOffload(true);
        final AfPacketSockets sockets = new AfPacketSockets(asked, AfPacketSockets.NO_FANOUT);
        assertThat(sockets.configuration().segmentationOffload())
            .isEqualTo(KernelRelease.current().packetSocketsSegmentUdp());
        assertThat(sockets.configuration().txFrameSize()).as("the rings as asked").isEqualTo(asked.txFrameSize());
    }
}

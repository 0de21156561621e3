package io.netreduce.protocol.port;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The {@link PacketPortVethContract} for {@link AfXdpPort}, and what only an AF_XDP port does: report its bind
 * and attach modes, leave no XDP program behind, refuse zero-copy on a driver without it.
 */
class AfXdpPortVethTest extends PacketPortVethContract
{
    @Override
    String namespaceTag()
    {
        return "x";
    }

    @Override
    PacketPort openPort(final String namespace, final String device)
    {
        return open(namespace, AfXdpConfiguration.defaults(device));
    }

    @Override
    PacketPort openPortWithTransmitSlots(final String namespace, final String device, final int slots)
    {
        return open(namespace, AfXdpConfiguration.defaults(device).withTxFrameCount(slots));
    }

    @Override
    PacketPort openPortWithTinyReceiveRing(final String namespace, final String device)
    {
        return open(namespace, AfXdpConfiguration.defaults(device).withRxRingSize(64));
    }

    @Override
    int tinyReceiveRingFrames()
    {
        return 64;
    }

    @Override
    int maxTxFrameLength(final PacketPort port)
    {
        return ((AfXdpPort)port).maxTxFrameLength();
    }

    @Override
    void refreshKernelStatistics(final PacketPort port)
    {
        ((AfXdpPort)port).refreshKernelStatistics();
    }

    private AfXdpPort open(final String namespace, final AfXdpConfiguration configuration)
    {
        return track(NetworkNamespace.callIn(namespace, () -> AfXdpPort.open(configuration)));
    }

    @Test
    void shouldBindVethInCopyModeAndSayHowItIsBound()
    {
        final AfXdpPort port = open(veth.namespaceB, AfXdpConfiguration.defaults(VethPair.DEVICE_B));

        assertThat(port.zeroCopy()).as("veth has no zero-copy AF_XDP").isFalse();
        assertThat(port.mode()).startsWith("copy/");
        assertThat(port.toString()).contains(port.mode()).contains("queue=0");
        assertThat(port.mtu()).isEqualTo(JUMBO_MTU);
        assertThat(port.maxTxFrameLength()).isEqualTo(JUMBO_MTU + 18);
    }

    @Test
    void shouldRefuseZeroCopyOnADriverWithoutIt()
    {
        assertThatThrownBy(() -> open(veth.namespaceB,
            AfXdpConfiguration.defaults(VethPair.DEVICE_B).withBindMode(XdpBindMode.ZERO_COPY)))
            .isInstanceOf(PortException.class)
            .hasMessageContaining("bind AF_XDP socket to 'vb' queue 0 (zero-copy");
    }

    @Test
    void shouldCarryFramesWithTheProgramOnTheGenericHook()
    {
        final AfXdpPort a = open(veth.namespaceA, AfXdpConfiguration.defaults(VethPair.DEVICE_A));
        final AfXdpPort b = open(veth.namespaceB,
            AfXdpConfiguration.defaults(VethPair.DEVICE_B).withAttachMode(XdpAttachMode.GENERIC));
        assertThat(b.nativeXdp()).isFalse();
        assertThat(VethPair.run("ip", "-n", veth.namespaceB, "link", "show", VethPair.DEVICE_B)).contains("xdpgeneric");

        final Random random = new Random(9);
        final List<byte[]> sent = List.of(testFrame(1, 60, random), testFrame(2, JUMBO_FRAME, random),
            testFrame(3, 1514, random));
        for (final byte[] frame : sent)
        {
            assertThat(a.send(new UnsafeBuffer(frame), 0, frame.length)).isTrue();
        }
        final List<byte[]> received = new ArrayList<>();
        awaitCondition(() ->
        {
            a.flush();
            b.receive(collectTestFrames(received), 64);
            return received.size() >= sent.size();
        });
        assertThat(received).containsExactlyElementsOf(sent);
    }

    @Test
    void shouldLeaveNoXdpProgramOnTheInterfaceOnceClosed()
    {
        final AfXdpPort port = open(veth.namespaceB, AfXdpConfiguration.defaults(VethPair.DEVICE_B));
        assertThat(VethPair.run("ip", "-n", veth.namespaceB, "link", "show", VethPair.DEVICE_B)).contains("xdp");

        port.close();

        assertThat(VethPair.run("ip", "-n", veth.namespaceB, "link", "show", VethPair.DEVICE_B))
            .doesNotContain("xdp");
    }

    @Test
    void shouldKeepTheInterfacePromiscuousOnlyWhileOpen()
    {
        final AfXdpPort port = open(veth.namespaceB, AfXdpConfiguration.defaults(VethPair.DEVICE_B));

        // The kernel's promiscuity count (ip -d), not the PROMISC flag an administrator sets.
        assertThat(VethPair.run("ip", "-d", "-n", veth.namespaceB, "link", "show", VethPair.DEVICE_B))
            .contains("promiscuity 1");
        port.close();
        assertThat(VethPair.run("ip", "-d", "-n", veth.namespaceB, "link", "show", VethPair.DEVICE_B))
            .contains("promiscuity 0");
    }

    @Test
    void shouldRefuseASecondPortOnTheSameInterfaceNamingTheAttachedProgram()
    {
        open(veth.namespaceB, AfXdpConfiguration.defaults(VethPair.DEVICE_B));

        assertThatThrownBy(() -> open(veth.namespaceB, AfXdpConfiguration.defaults(VethPair.DEVICE_B)))
            .isInstanceOf(PortException.class)
            .hasMessageContaining("'vb'");
    }

    @Test
    void shouldRejectInvalidConfigurationsBeforeTouchingTheKernel()
    {
        assertThatThrownBy(() -> AfXdpConfiguration.defaults("a-name-longer-than-15"))
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("1 to 15 characters");
        assertThatThrownBy(() -> AfXdpConfiguration.defaults("lo").withChunkSize(3000))
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("chunkSize");
        assertThatThrownBy(() -> AfXdpConfiguration.defaults("lo").withRxRingSize(1000))
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("rxRingSize");
        assertThatThrownBy(() -> AfXdpConfiguration.defaults("lo").withQueueId(-1))
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("queueId");
    }
}

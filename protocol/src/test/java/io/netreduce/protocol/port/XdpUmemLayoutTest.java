package io.netreduce.protocol.port;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * When an AF_XDP port binds with multi-buffer frames (XDP_USE_SG): only when a frame can span chunks. Multi-buffer
 * AF_XDP came with Linux 6.6; bound with it unconditionally, the port failed on Debian 12's 6.1 with EINVAL at every
 * start, MTU 1500 included (found running the daemon under systemd in a VM, issue 29).
 */
class XdpUmemLayoutTest
{
    private static XdpUmemLayout layout(final int chunkSize, final int mtu)
    {
        return new XdpUmemLayout(AfXdpConfiguration.defaults("eth0").withChunkSize(chunkSize), mtu);
    }

    @Test
    void shouldBindWithoutMultiBufferWhileAFrameFitsOneChunkAfterTheHeadroom()
    {
        assertThat(layout(4096, 1500).needsMultiBuffer()).isFalse();
        // 4096 - 256 bytes of headroom = 3840 = MTU + Ethernet header + a VLAN tag (18)
        assertThat(layout(4096, 3822).needsMultiBuffer()).isFalse();
        assertThat(layout(4096, 3823).needsMultiBuffer()).isTrue();
        assertThat(layout(4096, 9000).needsMultiBuffer()).isTrue();
        assertThat(layout(2048, 1500).needsMultiBuffer()).isFalse();
        assertThat(layout(2048, 1775).needsMultiBuffer()).isTrue();
    }

    @Test
    void shouldGiveAJumboFrameASlotOfSeveralChunks()
    {
        final XdpUmemLayout jumbo = layout(4096, 9000);
        assertThat(jumbo.maxFrameLength()).isEqualTo(9018);
        assertThat(jumbo.chunkCount()).isEqualTo(4096 + 1024 * 3);
        assertThat(layout(4096, 1500).chunkCount()).isEqualTo(4096 + 1024);
    }
}

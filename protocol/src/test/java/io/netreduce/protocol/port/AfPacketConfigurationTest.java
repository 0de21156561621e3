package io.netreduce.protocol.port;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

class AfPacketConfigurationTest
{
    private static final int LOOPBACK_MTU = 65536;

    /** A worker's port without offload: 1024 blocks of 16 KiB, one MTU-9000 slot each. */
    private static final AfPacketConfiguration WORKER = AfPacketConfiguration.defaults("lo")
        .withRxRing(16384, 1024, AfPacketConfiguration.DEFAULT_RX_BLOCK_TIMEOUT_MS);

    @Test
    void shouldGiveAV2RingTheOffloadRingsBlocksWhenAnMtuSizedSlotDoesNotFitItsBlocks()
    {
        final AfPacketConfiguration grown = WORKER.withRxRingHolding(LOOPBACK_MTU);

        assertThat(grown.rxBlockSize()).isEqualTo(AfPacketConfiguration.SEGMENTATION_RX_BLOCK_SIZE);
        assertThat(grown.rxBlockCount()).isEqualTo(AfPacketConfiguration.SEGMENTATION_RX_BLOCK_COUNT);
        assertThat(grown.rxFrameSizeFor(LOOPBACK_MTU)).isLessThanOrEqualTo(grown.rxBlockSize());
        assertThat(TpacketV2RxRing.frameCount(grown.rxBlockSize(), grown.rxBlockCount(),
            grown.rxFrameSizeFor(LOOPBACK_MTU))).isEqualTo(960);
    }

    @Test
    void shouldKeepTheRingsBytesWhenTheyExceedTheOffloadRings()
    {
        final AfPacketConfiguration grown = WORKER.withRxRing(16384, 8192, 1).withRxRingHolding(LOOPBACK_MTU);

        assertThat((long)grown.rxBlockSize() * grown.rxBlockCount()).isEqualTo(16384L * 8192);
    }

    @Test
    void shouldLeaveARingWhoseBlocksHoldAnMtuSizedSlotAsItIs()
    {
        assertThat(WORKER.withRxRingHolding(9000)).isEqualTo(WORKER);
    }

    @Test
    void shouldLeaveAnExplicitSlotSizeAndAV3RingAsAsked()
    {
        final AfPacketConfiguration explicit = WORKER.withRxFrameSize(2048);
        final AfPacketConfiguration v3 = WORKER.withRxRingVersion(RxRingVersion.V3);

        assertThat(explicit.withRxRingHolding(LOOPBACK_MTU)).isEqualTo(explicit);
        assertThat(v3.withRxRingHolding(LOOPBACK_MTU)).isEqualTo(v3);
    }
}

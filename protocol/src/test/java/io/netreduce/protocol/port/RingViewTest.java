package io.netreduce.protocol.port;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;

import static org.assertj.core.api.Assertions.assertThat;

class RingViewTest
{
    @Test
    void shouldViewDirectMemoryThroughTheSameKindOfBufferAsARealRing()
    {
        final ByteBuffer memory = ByteBuffer.allocateDirect(4096);
        final UnsafeBuffer view = AfPacketPort.ringView(memory);

        view.putLong(8, 0x0102_0304_0506_0708L);
        assertThat(memory.getLong(8)).as("the same memory").isEqualTo(Long.reverseBytes(0x0102_0304_0506_0708L));
        assertThat(view.capacity()).isEqualTo(memory.capacity());

        // what C2's type checks see: the buffer class and memory session of a mapped ring's view
        final UnsafeBuffer ring = AfPacketPort.ringBuffer(MemorySegment.ofBuffer(memory).address(), 4096);
        assertThat(view.byteBuffer().getClass()).isEqualTo(ring.byteBuffer().getClass());
        assertThat(view.byteBuffer().isDirect()).isTrue();
    }
}

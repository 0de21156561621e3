package io.netreduce.protocol.port;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static org.junit.jupiter.api.Assertions.assertEquals;

class RingIndexTest
{
    @ParameterizedTest
    @ValueSource(ints = {1, 2, 3, 7, 960, 1024, 4095})
    void shouldStepThroughEverySlotAndWrapAfterTheLast(final int count)
    {
        int index = 0;
        for (int step = 1; step <= 3 * count; step++)
        {
            index = RingIndex.next(index, count);
            assertEquals(step % count, index, "step " + step + " of a ring of " + count);
        }
    }

    @Test
    void shouldWrapTheLargestRingItAllows()
    {
        final int count = 1 << 30;
        assertEquals(0, RingIndex.next(count - 1, count));
        assertEquals(count - 1, RingIndex.next(count - 2, count));
        assertEquals(1, RingIndex.next(0, count));
    }
}

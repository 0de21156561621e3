package io.netreduce.host.allreduce;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.SplittableRandom;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

/**
 * The window law (PANAMA Fig. 5 without slow start, DCTCP's update): alpha &lt;- (1 - g) alpha + g F per observed
 * window of results, the window cut to (1 - alpha/2) of itself on a marked window, grown by one message on a clean
 * one, between 1 and the ring's N.
 */
class CongestionWindowTest
{
    private static void results(final CongestionWindow window, final int count, final boolean marked)
    {
        for (int i = 0; i < count; i++)
        {
            window.onResult(marked);
        }
    }

    @Test
    void shouldStayAtTheCapWithoutMarksWhileAlphaDecays()
    {
        final CongestionWindow window = new CongestionWindow(16, CongestionControl.DEFAULT);
        assertThat(window.window()).isEqualTo(16);
        results(window, 16 * 10, false);
        assertThat(window.window()).isEqualTo(16);
        assertThat(window.alpha()).isCloseTo(Math.pow(15.0 / 16, 10), within(1e-12));
        assertThat(window.decreases()).isZero();
        assertThat(window.increases()).as("nothing to grow at the cap").isZero();
        assertThat(window.results()).isEqualTo(160);
        assertThat(window.markedResults()).isZero();
        assertThat(window.minWindow()).isEqualTo(16);
    }

    @Test
    void shouldCountTheMarkedFractionOfAResultsPacketsNotTheWholeResult()
    {
        // g = 1, so alpha is the last window's marked fraction: one packet in sixteen of every result is F = 1/16
        final CongestionWindow window = new CongestionWindow(16, new CongestionControl(true, 1.0));
        for (int i = 0; i < 16; i++)
        {
            window.onResult(1, 16);
        }
        assertThat(window.alpha()).isCloseTo(1.0 / 16, within(1e-12));
        assertThat(window.exactWindow()).as("cut to (1 - alpha/2): 16 x 31/32").isCloseTo(15.5, within(1e-12));
        assertThat(window.window()).isEqualTo(15);
        assertThat(window.markedResults()).as("a result with a marked packet still counts as marked").isEqualTo(16);

        // every packet of every result marked: F = 1, halved
        for (int i = 0; i < 15; i++)
        {
            window.onResult(16, 16);
        }
        assertThat(window.alpha()).isEqualTo(1.0);
        assertThat(window.window()).isEqualTo(7);
    }

    @Test
    void shouldTakeAResultOfNoPacketsAsOneAndNeverCountMoreThanItsPackets()
    {
        final CongestionWindow window = new CongestionWindow(4, new CongestionControl(true, 1.0));
        window.onResult(1, 0);
        window.onResult(5, 2);
        window.onResult(0, 16);
        window.onResult(0, 16);
        assertThat(window.alpha()).as("(1 + 1 + 0 + 0) / 4").isCloseTo(0.5, within(1e-12));
        assertThat(window.window()).isEqualTo(3);
    }

    @Test
    void shouldHalveOnTheFirstMarkedWindowAndKeepCuttingDownToOne()
    {
        final CongestionWindow window = new CongestionWindow(16, CongestionControl.DEFAULT);
        results(window, 15, true);
        assertThat(window.window()).as("the law acts once per window of results").isEqualTo(16);
        window.onResult(true);
        // alpha = 15/16 * 1 + 1/16 * 1 = 1: cut to half.
        assertThat(window.alpha()).isEqualTo(1.0);
        assertThat(window.window()).isEqualTo(8);
        results(window, 8, true);
        assertThat(window.window()).isEqualTo(4);
        results(window, 4, true);
        results(window, 2, true);
        assertThat(window.window()).isEqualTo(1);
        results(window, 5, true);
        assertThat(window.window()).as("floor").isEqualTo(1);
        assertThat(window.exactWindow()).isEqualTo(1.0);
        assertThat(window.minWindow()).isEqualTo(1);
        assertThat(window.decreases()).isEqualTo(9);
    }

    @Test
    void shouldCutByHalfAlphaWhereAlphaFollowsTheMarkedFraction()
    {
        final CongestionWindow window = new CongestionWindow(64, new CongestionControl(true, 0.25));
        // 64 results, 16 marked: F = 1/4, alpha = 0.75 + 0.25 * 0.25 = 0.8125, window 64 * (1 - 0.40625) = 38
        results(window, 48, false);
        results(window, 16, true);
        assertThat(window.alpha()).isCloseTo(0.8125, within(1e-12));
        assertThat(window.exactWindow()).isCloseTo(64 * (1 - 0.8125 / 2), within(1e-9));
        assertThat(window.window()).isEqualTo(38);
        // The next observation spans 38 results: 19 marked, F = 1/2, alpha = 0.609375 + 0.125 = 0.734375.
        results(window, 19, true);
        results(window, 19, false);
        assertThat(window.alpha()).isCloseTo(0.8125 * 0.75 + 0.25 * 0.5, within(1e-12));
        assertThat(window.exactWindow()).isCloseTo(64 * (1 - 0.8125 / 2) * (1 - 0.734375 / 2), within(1e-9));
    }

    @Test
    void shouldGrowByOneMessagePerCleanWindowUpToTheCap()
    {
        final CongestionWindow window = new CongestionWindow(8, CongestionControl.DEFAULT);
        results(window, 8, true);
        results(window, 4, true);
        results(window, 2, true);
        assertThat(window.window()).isEqualTo(1);
        int expected = 1;
        while (expected < 8)
        {
            results(window, expected - 1, false);
            assertThat(window.window()).isEqualTo(expected);
            window.onResult(false);
            expected++;
            assertThat(window.window()).isEqualTo(expected);
        }
        results(window, 8 * 5, false);
        assertThat(window.window()).isEqualTo(8);
        assertThat(window.increases()).isEqualTo(7);
    }

    @ParameterizedTest(name = "seed {0}")
    @ValueSource(longs = { 1, 2, 3, 4, 5 })
    void shouldAgreeWithAStraightTranscriptionOfTheLawAndStayBetweenOneAndTheCap(final long seed)
    {
        final SplittableRandom random = new SplittableRandom(seed);
        final int cap = 1 << random.nextInt(8);
        final double g = 1.0 / (1 << random.nextInt(6));
        final CongestionWindow window = new CongestionWindow(cap, new CongestionControl(true, g));
        double cwnd = cap;
        double alpha = 1;
        int received = 0;
        int marks = 0;
        int observe = cap;
        final double p = random.nextDouble();
        for (int i = 0; i < 20_000; i++)
        {
            final boolean marked = random.nextDouble() < p;
            window.onResult(marked);
            received++;
            marks += marked ? 1 : 0;
            if (received == observe)
            {
                alpha = alpha * (1 - g) + g * marks / (double)received;
                cwnd = marks == 0 ? Math.min(cap, cwnd + 1) : Math.max(1, cwnd * (1 - alpha / 2));
                observe = Math.max(1, (int)cwnd);
                received = 0;
                marks = 0;
            }
            assertThat(window.window()).isEqualTo(Math.max(1, (int)cwnd)).isBetween(1, cap);
            assertThat(window.alpha()).isCloseTo(alpha, within(1e-12));
        }
    }

    @Test
    void shouldOnlyCountMarksWhenDisabled()
    {
        final CongestionWindow window = new CongestionWindow(16, CongestionControl.OFF);
        results(window, 100, true);
        assertThat(window.window()).isEqualTo(16);
        assertThat(window.markedResults()).isEqualTo(100);
        assertThat(window.decreases()).isZero();
        assertThat(window.alpha()).as("not estimated").isEqualTo(1.0);
        assertThat(window.enabled()).isFalse();
    }

    @Test
    void shouldRefuseAGainOutsideZeroToOne()
    {
        assertThatThrownBy(() -> new CongestionControl(true, 0)).isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining("(0, 1]");
        assertThatThrownBy(() -> new CongestionControl(true, 1.5)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new CongestionControl(true, Double.NaN)).isInstanceOf(IllegalArgumentException.class);
        assertThat(new CongestionControl(true, 1).gain()).isEqualTo(1.0);
        assertThatThrownBy(() -> new CongestionWindow(0, CongestionControl.DEFAULT))
            .isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void shouldNeverCutBelowTheMinimumWindowAndCountTheDwellAtItAsCuts()
    {
        final CongestionWindow window = new CongestionWindow(16, new CongestionControl(true, 1.0 / 16, 2));
        assertThat(window.floor()).isEqualTo(2);
        results(window, 16, true);
        assertThat(window.window()).isEqualTo(8);
        results(window, 8, true);
        results(window, 4, true);
        assertThat(window.window()).isEqualTo(2);
        for (int i = 0; i < 50; i++)
        {
            results(window, window.window(), true);
            assertThat(window.window()).as("every result marked, still the floor").isEqualTo(2);
        }
        assertThat(window.exactWindow()).isEqualTo(2.0);
        assertThat(window.minWindow()).isEqualTo(2);
        assertThat(window.decreases()).isEqualTo(53);
        results(window, 2, false);
        assertThat(window.window()).as("a clean window grows from the floor").isEqualTo(3);
    }

    @Test
    void shouldHoldAMinimumWindowAboveTheCapAtTheCap()
    {
        final CongestionWindow window = new CongestionWindow(4, new CongestionControl(true, 1.0 / 16, 8));
        assertThat(window.floor()).isEqualTo(4);
        results(window, 40, true);
        assertThat(window.window()).as("the appliance holds no more than the cap").isEqualTo(4);
        assertThat(window.minWindow()).isEqualTo(4);
    }

    @ParameterizedTest(name = "floor {0}")
    @ValueSource(ints = { 1, 2, 4 })
    void shouldAgreeWithTheLawCutToTheMinimumWindow(final int floor)
    {
        final SplittableRandom random = new SplittableRandom(floor);
        final int cap = 16;
        final double g = 1.0 / 16;
        final CongestionWindow window = new CongestionWindow(cap, new CongestionControl(true, g, floor));
        double cwnd = cap;
        double alpha = 1;
        int received = 0;
        int marks = 0;
        int observe = cap;
        for (int i = 0; i < 20_000; i++)
        {
            final boolean marked = random.nextDouble() < 0.7;
            window.onResult(marked);
            received++;
            marks += marked ? 1 : 0;
            if (received == observe)
            {
                alpha = alpha * (1 - g) + g * marks / (double)received;
                cwnd = marks == 0 ? Math.min(cap, cwnd + 1) : Math.max(floor, cwnd * (1 - alpha / 2));
                observe = Math.max(floor, (int)cwnd);
                received = 0;
                marks = 0;
            }
            assertThat(window.window()).isEqualTo(Math.max(floor, (int)cwnd)).isBetween(floor, cap);
        }
        assertThat(window.minWindow()).isEqualTo(floor);
    }

    @Test
    void shouldRefuseAMinimumWindowBelowOneAndDefaultToOne()
    {
        assertThatThrownBy(() -> new CongestionControl(true, 1.0 / 16, 0)).isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining("minimum window must be at least 1 message: 0");
        assertThatThrownBy(() -> new CongestionControl(true, 1.0 / 16, -3))
            .isInstanceOf(IllegalArgumentException.class);
        assertThat(CongestionControl.DEFAULT.minWindow()).isEqualTo(1);
        assertThat(new CongestionControl(true, 0.5).minWindow()).isEqualTo(1);
    }
}

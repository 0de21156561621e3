package io.netreduce.daemon;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;

class LateClassesTest
{
    @Test
    void shouldFindEveryClassItLoadsAheadOfTheWarmUpOnTheDaemonsClassPath()
    {
        // A name that no longer resolves (a library renamed its class) would silently stop saving compile time.
        assertEquals(LateClasses.NAMES.size(), LateClasses.load());
    }
}

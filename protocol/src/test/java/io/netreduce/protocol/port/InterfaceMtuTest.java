package io.netreduce.protocol.port;

import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

class InterfaceMtuTest
{
    @Test
    void shouldReadLoopbacksMtuAsTheKernelReportsIt() throws Exception
    {
        // The test runs in the namespace whose sysfs is mounted (no unit, no netns exec): the two views agree.
        final int sysfs = Integer.parseInt(Files.readString(Path.of("/sys/class/net/lo/mtu")).trim());

        assertThat(InterfaceMtu.of("lo")).hasValue(sysfs);
    }

    @Test
    void shouldGiveNothingForAnInterfaceThatIsNotHereOrANameTheKernelCannotHold()
    {
        assertThat(InterfaceMtu.of("nr-nosuch0")).isEmpty();
        assertThat(InterfaceMtu.of("")).isEmpty();
        assertThat(InterfaceMtu.of("a-name-longer-than-ifnamsiz")).isEmpty();
        assertThat(InterfaceMtu.of(null)).isEmpty();
    }
}

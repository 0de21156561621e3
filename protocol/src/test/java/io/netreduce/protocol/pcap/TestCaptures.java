package io.netreduce.protocol.pcap;

import java.net.URISyntaxException;
import java.net.URL;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;

/**
 * Where the tests find the real soft-RoCE capture: the copy in this module's test resources always, and the
 * original in {@code <repo>/../shared/testdata} when the repository sits beside it (as in CI).
 */
public final class TestCaptures
{
    public static final String SOFT_ROCE = "rxe-rc-write-send-ack.pcap";
    public static final int SOFT_ROCE_FRAMES = 120;

    private TestCaptures()
    {
    }

    /**
     * @return the in-repository copy of the soft-RoCE capture.
     */
    public static Path softRoceCopy()
    {
        final URL url = TestCaptures.class.getResource("/pcap/" + SOFT_ROCE);
        if (null == url)
        {
            throw new IllegalStateException("test resource /pcap/" + SOFT_ROCE + " missing");
        }
        try
        {
            return Path.of(url.toURI());
        }
        catch (final URISyntaxException ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    /**
     * @return the original capture in {@code <repo>/../shared/testdata}, if that directory exists.
     */
    public static Optional<Path> sharedOriginal()
    {
        final Path file = repoRoot().resolve("../shared/testdata").resolve(SOFT_ROCE).normalize();
        return Files.isRegularFile(file) ? Optional.of(file) : Optional.empty();
    }

    /**
     * @return the repository root: the {@code netreduce.repo.root} property Surefire sets, else the nearest
     * ancestor of the working directory that holds {@code mvnw}.
     */
    public static Path repoRoot()
    {
        final String property = System.getProperty("netreduce.repo.root");
        if (null != property && !property.isBlank())
        {
            return Path.of(property).toAbsolutePath().normalize();
        }
        Path dir = Path.of("").toAbsolutePath();
        while (null != dir && !Files.isRegularFile(dir.resolve("mvnw")))
        {
            dir = dir.getParent();
        }
        if (null == dir)
        {
            throw new IllegalStateException("cannot find the repository root from " + Path.of("").toAbsolutePath());
        }
        return dir;
    }
}

package io.netreduce.daemon;

import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.jar.Attributes;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.jar.Manifest;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The launcher (src/main/dist/netreduce) and the JVMs' ahead-of-time caches: which cache it hands the JVM (a stand-in
 * {@code java} that prints its arguments), and, with the real JVM, that a cache made through the launcher is used and
 * that a cache the JVM refuses (stale, garbage) leaves the command's output as it is without one.
 */
class LauncherAotTest
{
    private static final Path ROOT = Path.of(System.getProperty("netreduce.repo.root", "..")).toAbsolutePath().normalize();
    private static final Path SOURCE = ROOT.resolve("aggregator-daemon/src/main/dist/netreduce");
    private static final String FLAGS = System.getProperty("netreduce.jvm.flags",
        "--enable-native-access=ALL-UNNAMED --add-opens java.base/jdk.internal.misc=ALL-UNNAMED " +
        "--add-modules jdk.incubator.vector");

    /**
     * What the test jar runs: one line on stdout, nothing else.
     */
    public static final class Probe
    {
        public static void main(final String[] args)
        {
            System.out.println("probe ready " + String.join(" ", args));
        }
    }

    record Result(int status, String out, String err)
    {
    }

    @TempDir
    Path dir;
    private Path bin;
    private Path launcher;
    private Path jar;
    private Path workerJar;

    @BeforeEach
    void install() throws IOException
    {
        bin = Files.createDirectories(dir.resolve("bin"));
        launcher = bin.resolve("netreduce");
        Files.writeString(launcher, Files.readString(SOURCE).replace("@netreduce.jvm.flags@", FLAGS));
        Files.setPosixFilePermissions(launcher, PosixFilePermissions.fromString("rwxr-xr-x"));
        jar = bin.resolve("netreduce.jar");
        workerJar = bin.resolve("netreduce-worker.jar");
        writeJar(jar, "");
        writeJar(workerJar, "");
        aged(jar);
        aged(workerJar);
    }

    // -- which cache: a stand-in java --------------------------------------------------------------------------------

    @Test
    void shouldRunWithoutACacheWhenThereIsNone() throws Exception
    {
        assertThat(argsOf(Map.of(), "daemon", "--config", "x.yaml")).noneMatch(a -> a.startsWith("-XX:AOT"))
            .containsSubsequence("-jar", jar.toString(), "daemon", "--config", "x.yaml");
    }

    @Test
    void shouldUseTheCommandsCacheWhenItIsNewerThanTheJar() throws Exception
    {
        final Path cache = Files.createFile(bin.resolve("netreduce-daemon.aot"));

        final List<String> args = argsOf(Map.of(), "daemon", "--config", "x.yaml");

        assertThat(args).containsSubsequence("-XX:AOTMode=auto", "-XX:AOTCache=" + cache, "-Xlog:aot*=off",
            "-Xlog:cds*=off", "-jar", jar.toString(), "daemon");
        assertThat(args.indexOf("-XX:AOTCache=" + cache)).isGreaterThan(args.indexOf("--enable-native-access=ALL-UNNAMED"));
    }

    @Test
    void shouldPickTheWorkerSubcommandsCacheBesideTheWorkerJar() throws Exception
    {
        final Path serve = Files.createFile(bin.resolve("netreduce-worker-serve.aot"));
        Files.createFile(bin.resolve("netreduce-worker-allreduce.aot"));

        assertThat(argsOf(Map.of(), "worker", "serve", "--dev", "eth0"))
            .contains("-XX:AOTCache=" + serve).containsSubsequence("-jar", workerJar.toString(), "serve");
        assertThat(argsOf(Map.of(), "worker", "write-bw")).noneMatch(a -> a.startsWith("-XX:AOT"));
    }

    @Test
    void shouldLeaveAStaleCacheOut() throws Exception
    {
        final Path cache = Files.createFile(bin.resolve("netreduce-ctl.aot"));
        Files.setLastModifiedTime(cache, FileTime.from(Instant.now().minusSeconds(3600)));

        assertThat(argsOf(Map.of(), "ctl", "rings")).noneMatch(a -> a.startsWith("-XX:AOT"));
    }

    @Test
    void shouldUseNoCacheWhenToldNot() throws Exception
    {
        Files.createFile(bin.resolve("netreduce-daemon.aot"));

        assertThat(argsOf(Map.of("NETREDUCE_AOT", "off"), "daemon")).noneMatch(a -> a.startsWith("-XX:AOT"));
    }

    @Test
    void shouldLookInTheCacheDirectoryWhenOneIsNamed() throws Exception
    {
        final Path elsewhere = Files.createDirectories(dir.resolve("cache"));
        final Path cache = Files.createFile(elsewhere.resolve("netreduce-daemon.aot"));

        assertThat(argsOf(Map.of("NETREDUCE_AOT_DIR", elsewhere.toString()), "daemon")).contains("-XX:AOTCache=" + cache);
    }

    @Test
    void shouldAskTheJvmToWriteTheCacheInATrainingRun() throws Exception
    {
        Files.createFile(bin.resolve("netreduce-daemon.aot"));

        final List<String> args = argsOf(Map.of("NETREDUCE_AOT_OUTPUT", "/tmp/x.aot"), "daemon");

        assertThat(args).contains("-XX:AOTCacheOutput=/tmp/x.aot").noneMatch(a -> a.startsWith("-XX:AOTCache="));
    }

    @Test
    void shouldPrintWhereTheCacheOfACommandIs() throws Exception
    {
        final Result result = run(fakeJava(), Map.of("NETREDUCE_AOT", "print"), "worker", "serve");

        assertThat(result.status()).isZero();
        assertThat(result.out()).isEqualTo(bin.resolve("netreduce-worker-serve.aot") + "\n" + workerJar + "\n");
    }

    // -- the real JVM ----------------------------------------------------------------------------------------------

    @Test
    void shouldMakeACacheThroughTheLauncherAndLoadClassesFromIt() throws Exception
    {
        final Path javaHome = Path.of(System.getProperty("java.home"));
        final Path cache = bin.resolve("netreduce-daemon.aot");

        final Result training = run(javaHome, Map.of("NETREDUCE_AOT_OUTPUT", cache.toString()), "daemon", "train");
        assertThat(training.status()).as(training.out() + training.err()).isZero();
        assertThat(cache).isNotEmptyFile();

        final Result used = run(javaHome, Map.of("NETREDUCE_JAVA_OPTS", "-Xlog:class+load=info:file=" +
            dir.resolve("classes.log")), "daemon", "run");
        assertThat(used.status()).isZero();
        assertThat(used.out()).isEqualTo("probe ready daemon run\n");
        assertThat(Files.readString(dir.resolve("classes.log")))
            .containsPattern("LauncherAotTest\\$Probe source: shared objects file");

        final Result without = run(javaHome, Map.of("NETREDUCE_AOT", "off", "NETREDUCE_JAVA_OPTS",
            "-Xlog:class+load=info:file=" + dir.resolve("classes-off.log")), "daemon", "run");
        assertThat(without.out()).isEqualTo("probe ready daemon run\n");
        assertThat(Files.readString(dir.resolve("classes-off.log")))
            .doesNotContainPattern("LauncherAotTest\\$Probe source: shared objects file");
    }

    @Test
    void shouldRunSilentlyWithoutACacheTheJvmRefuses() throws Exception
    {
        final Path javaHome = Path.of(System.getProperty("java.home"));
        final Path cache = bin.resolve("netreduce-daemon.aot");
        assertThat(run(javaHome, Map.of("NETREDUCE_AOT_OUTPUT", cache.toString()), "daemon").status()).isZero();
        // the jar rebuilt (another size and time) while the cache looks newer: the JVM refuses the cache
        writeJar(jar, "rebuilt");
        aged(jar);
        assertThat(cache).isNotEmptyFile();
        assertRunsAsWithout(javaHome);

        Files.writeString(cache, "not a cache");
        assertRunsAsWithout(javaHome);

        Files.write(cache, Arrays.copyOf(Files.readAllBytes(jar), 4096));
        assertRunsAsWithout(javaHome);
    }

    private void assertRunsAsWithout(final Path javaHome) throws Exception
    {
        final Result result = run(javaHome, Map.of(), "daemon", "x");
        assertThat(result.status()).isZero();
        assertThat(result.out()).isEqualTo("probe ready daemon x\n");
        assertThat(result.err().toLowerCase(java.util.Locale.ROOT)).doesNotContain("aot", "cds", "error", "shared");
    }

    // -- scripts/aot-train.sh's freshness check -------------------------------------------------------------------

    @Test
    void aotTrainShouldKeepTheCachesOfAJarRebuiltWithTheSameBytes() throws Exception
    {
        final List<Path> caches = List.of(bin.resolve("netreduce-daemon.aot"), bin.resolve("netreduce-ctl.aot"),
            bin.resolve("netreduce-worker-allreduce.aot"), bin.resolve("netreduce-worker-serve.aot"));
        for (final Path cache : caches)
        {
            Files.writeString(cache, "cache");
        }
        final String stampedTime = stamp(jar);
        stamp(workerJar);
        assertThat(aotTrainCheck().out()).contains("every cache is up to date");

        // rebuilt, the same bytes: the jar's time goes back to the stamp's and the caches hold
        Files.write(jar, Files.readAllBytes(jar));
        Files.setLastModifiedTime(jar, FileTime.from(Instant.now().plusSeconds(5)));
        final Result same = aotTrainCheck();
        assertThat(same.status()).as(same.out() + same.err()).isZero();
        assertThat(same.out()).contains("netreduce.jar rebuilt with the same bytes", "every cache is up to date");
        assertThat(mtime(jar)).isEqualTo(stampedTime);

        // rebuilt from changed sources: stale
        writeJar(jar, "changed");
        Files.setLastModifiedTime(jar, FileTime.from(Instant.now().plusSeconds(5)));
        final Result changed = aotTrainCheck();
        assertThat(changed.status()).isEqualTo(1);
        assertThat(changed.out()).contains("stale or missing").contains("daemon").contains("ctl")
            .doesNotContain("worker");
    }

    private Result aotTrainCheck() throws Exception
    {
        final ProcessBuilder builder = new ProcessBuilder("bash", ROOT.resolve("scripts/aot-train.sh").toString(),
            "--check", "--launcher", launcher.toString());
        builder.environment().keySet().removeIf(k -> k.startsWith("NETREDUCE_"));
        builder.environment().put("NETREDUCE_WORKER_JAR", workerJar.toString());
        final Process process = builder.start();
        final CompletableFuture<String> err = CompletableFuture.supplyAsync(() -> read(process.getErrorStream()));
        final String out = read(process.getInputStream());
        assertThat(process.waitFor(120, TimeUnit.SECONDS)).isTrue();
        return new Result(process.exitValue(), out, err.join());
    }

    /** Writes JAR.aot-stamp as scripts/aot-train.sh does after training; returns the recorded time. */
    private static String stamp(final Path jarFile) throws Exception
    {
        final String sum = java.util.HexFormat.of().formatHex(
            java.security.MessageDigest.getInstance("SHA-256").digest(Files.readAllBytes(jarFile)));
        final String time = mtime(jarFile);
        final String name = jarFile.getFileName().toString();
        Files.writeString(jarFile.resolveSibling(name.substring(0, name.length() - 4) + ".aot-stamp"),
            sum + " " + time + "\n");
        return time;
    }

    private static String mtime(final Path file) throws Exception
    {
        final Process stat = new ProcessBuilder("stat", "-c", "%.9Y", file.toString()).start();
        final String out = read(stat.getInputStream()).strip();
        assertThat(stat.waitFor(10, TimeUnit.SECONDS)).isTrue();
        return out;
    }

    // -- helpers ---------------------------------------------------------------------------------------------------

    private static void writeJar(final Path path, final String extra) throws IOException
    {
        final Manifest manifest = new Manifest();
        manifest.getMainAttributes().put(Attributes.Name.MANIFEST_VERSION, "1.0");
        manifest.getMainAttributes().put(Attributes.Name.MAIN_CLASS, Probe.class.getName());
        final String entry = Probe.class.getName().replace('.', '/') + ".class";
        try (OutputStream out = Files.newOutputStream(path);
            JarOutputStream jarOut = new JarOutputStream(out, manifest);
            InputStream in = Probe.class.getClassLoader().getResourceAsStream(entry))
        {
            jarOut.putNextEntry(new JarEntry(entry));
            in.transferTo(jarOut);
            jarOut.closeEntry();
            if (!extra.isEmpty())
            {
                jarOut.putNextEntry(new JarEntry("extra.txt"));
                jarOut.write(extra.getBytes(StandardCharsets.UTF_8));
                jarOut.closeEntry();
            }
        }
    }

    /** A jar a minute old, so that a cache written now is newer. */
    private static void aged(final Path path) throws IOException
    {
        Files.setLastModifiedTime(path, FileTime.from(Instant.now().minusSeconds(60)));
    }

    /** A JAVA_HOME whose bin/java says it is 25 and prints its arguments, one a line. */
    private Path fakeJava() throws IOException
    {
        final Path home = dir.resolve("fake-jdk");
        final Path java = Files.createDirectories(home.resolve("bin")).resolve("java");
        Files.writeString(java, """
            #!/bin/sh
            if [ "$1" = -version ]; then echo 'openjdk version "25.0.1" 2025-10-21' >&2; exit 0; fi
            printf '%s\\n' "$@"
            """);
        Files.setPosixFilePermissions(java, PosixFilePermissions.fromString("rwxr-xr-x"));
        return home;
    }

    private List<String> argsOf(final Map<String, String> env, final String... args) throws Exception
    {
        final Result result = run(fakeJava(), env, args);
        assertThat(result.status()).as(result.err()).isZero();
        return List.of(result.out().split("\n"));
    }

    private Result run(final Path javaHome, final Map<String, String> env, final String... args) throws Exception
    {
        final List<String> command = new ArrayList<>(List.of(launcher.toString()));
        command.addAll(List.of(args));
        final ProcessBuilder builder = new ProcessBuilder(command);
        builder.environment().keySet().removeIf(k -> k.startsWith("NETREDUCE_"));
        builder.environment().put("JAVA_HOME", javaHome.toString());
        builder.environment().put("NETREDUCE_WORKER_JAR", workerJar.toString());
        builder.environment().putAll(env);
        final Process process = builder.start();
        final CompletableFuture<String> err = CompletableFuture.supplyAsync(() -> read(process.getErrorStream()));
        final String out = read(process.getInputStream());
        assertThat(process.waitFor(120, TimeUnit.SECONDS)).isTrue();
        return new Result(process.exitValue(), out, err.join());
    }

    private static String read(final InputStream in)
    {
        try
        {
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
        catch (final IOException ex)
        {
            throw new java.io.UncheckedIOException(ex);
        }
    }
}

package io.netreduce.controlplane.api;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.Set;

/**
 * The control API's bearer token, kept in a file only its owner can read: the daemon creates it (a random 256-bit
 * token, mode 0600, in a directory it creates 0700) when it is missing, and refuses to use one that others can
 * read; {@code netreduce ctl} reads the same file.
 */
public final class TokenFile
{
    private static final Set<PosixFilePermission> OTHERS = Set.of(
        PosixFilePermission.GROUP_READ, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_EXECUTE,
        PosixFilePermission.OTHERS_READ, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_EXECUTE);

    private TokenFile()
    {
    }

    /**
     * The daemon's side: read the token, creating the file first if it does not exist.
     *
     * @throws IOException naming the file and what is wrong with it.
     */
    public static String loadOrCreate(final Path file) throws IOException
    {
        if (!Files.exists(file))
        {
            final Path dir = file.toAbsolutePath().getParent();
            if (dir != null && !Files.isDirectory(dir))
            {
                Files.createDirectories(dir, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString(
                    "rwx------")));
            }
            final byte[] random = new byte[32];
            new SecureRandom().nextBytes(random);
            Files.writeString(Files.createFile(file, PosixFilePermissions.asFileAttribute(
                PosixFilePermissions.fromString("rw-------"))), HexFormat.of().formatHex(random) + "\n");
        }
        return read(file);
    }

    /**
     * Read the token from a file only its owner can read.
     *
     * @throws IOException naming the file and what is wrong with it.
     */
    public static String read(final Path file) throws IOException
    {
        final Set<PosixFilePermission> permissions = Files.getPosixFilePermissions(file);
        if (permissions.stream().anyMatch(OTHERS::contains))
        {
            throw new IOException("API token file " + file + " has mode " +
                PosixFilePermissions.toString(permissions) + ": others could read the token; chmod 600 it");
        }
        final String token = Files.readString(file).trim();
        if (token.length() < 16 || !token.chars().allMatch(c -> c > 0x20 && c < 0x7F))
        {
            throw new IOException("API token file " + file + " must hold one token of at least 16 printable " +
                "characters");
        }
        return token;
    }
}

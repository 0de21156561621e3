package io.netreduce.daemon.capture;

import io.netreduce.controlplane.api.BadRequestException;
import io.netreduce.controlplane.api.ConflictException;
import io.netreduce.dataplane.capture.CaptureFileWriter;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;

/**
 * The one directory API-requested captures may be written to ({@code appliance.captureDirectory}). The daemon
 * runs with privileges, so a request must not be able to create or overwrite a file anywhere else: a path is
 * resolved against the directory, normalised, must stay inside it (also after following symbolic links in its
 * directories), and must not exist yet. The file itself is then created with O_EXCL, which does not follow a
 * symbolic link planted in its place.
 */
final class CaptureDirectory
{
    private final Path directory;

    /**
     * @param directory an absolute path (validated with the configuration); created when the first capture starts.
     */
    CaptureDirectory(final Path directory)
    {
        this.directory = directory.toAbsolutePath().normalize();
    }

    Path path()
    {
        return directory;
    }

    /**
     * @param file the requested file, absolute or relative to the capture directory.
     * @return where to create it.
     * @throws BadRequestException if it is outside the capture directory or its directory does not exist.
     * @throws ConflictException   if it (or its reasons file) exists already.
     * @throws IllegalStateException if the capture directory cannot be created.
     */
    Path resolve(final String file)
    {
        final Path target;
        try
        {
            target = directory.resolve(file).normalize();
        }
        catch (final InvalidPathException ex)
        {
            throw new BadRequestException("'" + file + "' is not a valid path: " + ex.getReason());
        }
        if (!target.startsWith(directory) || target.equals(directory))
        {
            throw new BadRequestException("'" + file + "' is outside the capture directory " + directory +
                " (appliance.captureDirectory)");
        }
        createDirectory();
        final Path parent = target.getParent();
        if (!Files.isDirectory(parent))
        {
            throw new BadRequestException("directory " + parent + " does not exist");
        }
        final Path realParent;
        try
        {
            realParent = parent.toRealPath();
            if (!realParent.startsWith(directory.toRealPath()))
            {
                throw new BadRequestException("'" + file + "' leaves the capture directory " + directory +
                    " through a symbolic link");
            }
        }
        catch (final IOException ex)
        {
            throw new BadRequestException("directory " + parent + ": " + ex);
        }
        for (final Path existing : new Path[]{ target, CaptureFileWriter.reasonsFileOf(target) })
        {
            if (Files.exists(existing, LinkOption.NOFOLLOW_LINKS))
            {
                throw new ConflictException(existing + " exists; captures never replace a file");
            }
        }
        // The path as the operator wrote it (under systemd's DynamicUser the real one is in /var/lib/private).
        return target;
    }

    private void createDirectory()
    {
        if (Files.isDirectory(directory))
        {
            return;
        }
        try
        {
            Files.createDirectories(directory,
                PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwxr-x---")));
        }
        catch (final IOException | UnsupportedOperationException ex)
        {
            throw new IllegalStateException("cannot create the capture directory " + directory + ": " + ex, ex);
        }
    }
}

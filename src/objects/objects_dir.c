/*
 * objects_dir.c
 *		Server directories as object stores: a listing of the regular files
 *		under the server's directory, with a version id that is the SHA-256
 *		of the file's content (so it changes whenever the content does), and
 *		opening one file by its key.
 *
 *		A key is a relative path of non-empty components, none "." or "..";
 *		every component is opened with O_NOFOLLOW from the directory above
 *		it, so neither ".." nor a symbolic link anywhere below the server's
 *		directory can lead outside it.  Symbolic links, fifos, sockets and
 *		devices are not listed, and opening one is refused.
 */
#include "postgres.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "objects.h"
#include "common/sha256.h"

typedef struct DirFile
{
	char	   *key;
	int64		size;
	TimestampTz mtime;
} DirFile;

static int
dirfile_cmp(const void *a, const void *b)
{
	return strcmp(((const DirFile *) a)->key, ((const DirFile *) b)->key);
}

static void
dir_error_open(ObjServer *srv, const char *path)
{
	ereport(ERROR,
			(errcode_for_file_access(),
			 errmsg("could not open directory \"%s\" of server \"%s\": %m", path, srv->name)));
}

/* Collects the regular files below dirfd (path rel) into *files. */
static void
dir_walk(ObjServer *srv, int dirfd, const char *rel, const char *prefix,
		 DirFile **files, int *nfiles, int *cap, int depth)
{
	DIR		   *d;
	struct dirent *de;

	if (depth > 64)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("directory \"%s\" of server \"%s\" is nested more than 64 levels deep",
						rel, srv->name)));
	d = fdopendir(dirfd);
	if (d == NULL)
	{
		close(dirfd);
		dir_error_open(srv, rel[0] ? rel : srv->directory);
	}
	PG_TRY();
	{
		while ((de = readdir(d)) != NULL)
		{
			struct stat st;
			char	   *key;

			CHECK_FOR_INTERRUPTS();
			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
				continue;
			key = rel[0] ? psprintf("%s/%s", rel, de->d_name) : pstrdup(de->d_name);
			if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
				continue;		/* removed while we listed */
			if (S_ISDIR(st.st_mode))
			{
				int			sub;
				size_t		klen = strlen(key);

				/* Descend only where keys under it can match the prefix. */
				if (strncmp(key, prefix, Min(klen, strlen(prefix))) != 0)
					continue;
				sub = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
				if (sub < 0)
					dir_error_open(srv, key);
				dir_walk(srv, sub, key, prefix, files, nfiles, cap, depth + 1);
			}
			else if (S_ISREG(st.st_mode) && strncmp(key, prefix, strlen(prefix)) == 0)
			{
				if (*nfiles == *cap)
				{
					*cap *= 2;
					*files = repalloc_huge(*files, sizeof(DirFile) * *cap);
				}
				(*files)[*nfiles].key = key;
				(*files)[*nfiles].size = st.st_size;
				(*files)[*nfiles].mtime = time_t_to_timestamptz(st.st_mtim.tv_sec) +
					st.st_mtim.tv_nsec / 1000;
				(*nfiles)++;
			}
			/* symbolic links, fifos, sockets and devices are not objects */
		}
	}
	PG_FINALLY();
	{
		closedir(d);
	}
	PG_END_TRY();
}

/* SHA-256 of a file's content, as 64 hex digits. */
char *
dir_content_hash(ObjServer *srv, const char *key, int64 *size)
{
	int			fd = dir_open_object(srv, key);
	Sha256Ctx  *ctx = reconcile_sha256_begin();
	uint8		digest[RECONCILE_SHA256_LEN];
	char	   *hex = palloc(RECONCILE_HEX_LEN + 1);
	char	   *buf = palloc(65536);
	ssize_t		n;

	reconcile_sha256_init(ctx);
	*size = 0;
	PG_TRY();
	{
		while ((n = read(fd, buf, 65536)) > 0)
		{
			CHECK_FOR_INTERRUPTS();
			reconcile_sha256_update(ctx, buf, n);
			*size += n;
		}
		if (n < 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not read object \"%s\" of server \"%s\": %m", key, srv->name)));
	}
	PG_CATCH();
	{
		close(fd);
		PG_RE_THROW();
	}
	PG_END_TRY();
	close(fd);
	reconcile_sha256_final(ctx, digest);
	reconcile_sha256_end(ctx);
	reconcile_hex(digest, RECONCILE_SHA256_LEN, hex);
	hex[RECONCILE_HEX_LEN] = '\0';
	pfree(buf);
	return hex;
}

void
dir_list(ObjServer *srv, ObjListOptions *opts, ObjEntryCallback cb, void *arg)
{
	int			root = open(srv->directory, O_RDONLY | O_DIRECTORY);
	int			cap = 64;
	int			nfiles = 0;
	DirFile    *files = palloc(sizeof(DirFile) * cap);
	int			i;

	if (root < 0)
		dir_error_open(srv, srv->directory);
	dir_walk(srv, root, "", opts->prefix, &files, &nfiles, &cap, 0);
	qsort(files, nfiles, sizeof(DirFile), dirfile_cmp);
	for (i = 0; i < nfiles; i++)
	{
		ObjEntry	e;

		if (opts->start_after && strcmp(files[i].key, opts->start_after) <= 0)
			continue;
		memset(&e, 0, sizeof(e));
		e.key = files[i].key;
		e.version_id = dir_content_hash(srv, files[i].key, &e.size);
		e.last_modified = files[i].mtime;
		e.is_latest = true;
		cb(&e, arg);
		pfree(e.version_id);
	}
}

/*
 * Opens one regular file below the server's directory by key, refusing
 * keys that climb out ("..", an absolute path) and symbolic links at any
 * level.  The caller closes the descriptor.
 */
int
dir_open_object(ObjServer *srv, const char *key)
{
	int			dirfd;
	const char *p = key;
	char	   *comp = palloc(strlen(key) + 1);
	struct stat st;

	objects_check_key(key);
	dirfd = open(srv->directory, O_RDONLY | O_DIRECTORY);
	if (dirfd < 0)
		dir_error_open(srv, srv->directory);
	for (;;)
	{
		const char *slash = strchr(p, '/');
		size_t		len = slash ? (size_t) (slash - p) : strlen(p);
		int			fd;

		memcpy(comp, p, len);
		comp[len] = '\0';
		if (len == 0 || strcmp(comp, ".") == 0 || strcmp(comp, "..") == 0)
		{
			close(dirfd);
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("object key \"%s\" is not a path inside the directory of server \"%s\"",
							key, srv->name),
					 errdetail("A key is a relative path of non-empty components, none of them \".\" or \"..\".")));
		}
		fd = openat(dirfd, comp,
					(slash ? O_RDONLY | O_DIRECTORY : O_RDONLY | O_NONBLOCK) | O_NOFOLLOW);
		if (fd < 0)
		{
			int			save = errno;
			bool		link = false;

			if (save == ELOOP || save == ENOTDIR)
				link = fstatat(dirfd, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
			close(dirfd);
			if (link)
				ereport(ERROR,
						(errcode(ERRCODE_WRONG_OBJECT_TYPE),
						 errmsg("object \"%s\" of server \"%s\" is a symbolic link", key, srv->name),
						 errdetail("Symbolic links are not followed below a server directory.")));
			errno = save;
			ereport(ERROR,
					(errcode(save == ENOENT ? ERRCODE_UNDEFINED_OBJECT : ERRCODE_IO_ERROR),
					 errmsg("could not open object \"%s\" of server \"%s\": %m", key, srv->name)));
		}
		close(dirfd);
		if (slash == NULL)
		{
			if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
			{
				close(fd);
				ereport(ERROR,
						(errcode(ERRCODE_WRONG_OBJECT_TYPE),
						 errmsg("object \"%s\" of server \"%s\" is not a regular file", key, srv->name),
						 errdetail("Only regular files are objects; fifos, sockets and devices are not.")));
			}
			/* O_NONBLOCK kept a fifo from blocking the open; reads block. */
			fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
			pfree(comp);
			return fd;
		}
		dirfd = fd;
		p = slash + 1;
	}
}

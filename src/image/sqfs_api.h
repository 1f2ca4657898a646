// The libsquashfs (squashfs-tools-ng 1.2) functions Berth uses, resolved on first use (see
// core/dynlib.h). Internal to src/image: the squashfs writer and reader share it.
//
// Debian 12's libsquashfs1 1.2.0 is built with gzip, xz, lzma, lz4 and zstd (not lzo).
#pragma once

#include <sqfs/block.h>
#include <sqfs/block_processor.h>
#include <sqfs/block_writer.h>
#include <sqfs/compressor.h>
#include <sqfs/data_reader.h>
#include <sqfs/dir_reader.h>
#include <sqfs/dir_writer.h>
#include <sqfs/error.h>
#include <sqfs/frag_table.h>
#include <sqfs/id_table.h>
#include <sqfs/inode.h>
#include <sqfs/io.h>
#include <sqfs/meta_writer.h>
#include <sqfs/super.h>

#include "image/sqfs_errors.h"

#include <memory>

#include "core/dynlib.h"

namespace berth {

/// The functions, each resolved by its own name when the struct is built (see core/dynlib.h).
struct SqfsApi {
  // Both ways.
  BERTH_LAZY_FUNCTION(libsquashfs(), compressor_config_init, sqfs_compressor_config_init);
  BERTH_LAZY_FUNCTION(libsquashfs(), compressor_create, sqfs_compressor_create);
  BERTH_LAZY_FUNCTION(libsquashfs(), compressor_name_from_id, sqfs_compressor_name_from_id);
  BERTH_LAZY_FUNCTION(libsquashfs(), free, sqfs_free);
  // Writing.
  BERTH_LAZY_FUNCTION(libsquashfs(), super_init, sqfs_super_init);
  BERTH_LAZY_FUNCTION(libsquashfs(), super_write, sqfs_super_write);
  BERTH_LAZY_FUNCTION(libsquashfs(), block_writer_create, sqfs_block_writer_create);
  BERTH_LAZY_FUNCTION(libsquashfs(), frag_table_create, sqfs_frag_table_create);
  BERTH_LAZY_FUNCTION(libsquashfs(), frag_table_write, sqfs_frag_table_write);
  BERTH_LAZY_FUNCTION(libsquashfs(), block_processor_create_ex, sqfs_block_processor_create_ex);
  BERTH_LAZY_FUNCTION(libsquashfs(), block_processor_begin_file, sqfs_block_processor_begin_file);
  BERTH_LAZY_FUNCTION(libsquashfs(), block_processor_append, sqfs_block_processor_append);
  BERTH_LAZY_FUNCTION(libsquashfs(), block_processor_end_file, sqfs_block_processor_end_file);
  BERTH_LAZY_FUNCTION(libsquashfs(), block_processor_finish, sqfs_block_processor_finish);
  BERTH_LAZY_FUNCTION(libsquashfs(), id_table_create, sqfs_id_table_create);
  BERTH_LAZY_FUNCTION(libsquashfs(), id_table_id_to_index, sqfs_id_table_id_to_index);
  BERTH_LAZY_FUNCTION(libsquashfs(), id_table_write, sqfs_id_table_write);
  BERTH_LAZY_FUNCTION(libsquashfs(), meta_writer_create, sqfs_meta_writer_create);
  BERTH_LAZY_FUNCTION(libsquashfs(), meta_writer_flush, sqfs_meta_writer_flush);
  BERTH_LAZY_FUNCTION(libsquashfs(), meta_writer_get_position, sqfs_meta_writer_get_position);
  BERTH_LAZY_FUNCTION(libsquashfs(), meta_writer_write_inode, sqfs_meta_writer_write_inode);
  BERTH_LAZY_FUNCTION(libsquashfs(), meta_write_write_to_file, sqfs_meta_write_write_to_file);
  BERTH_LAZY_FUNCTION(libsquashfs(), dir_writer_create, sqfs_dir_writer_create);
  BERTH_LAZY_FUNCTION(libsquashfs(), dir_writer_begin, sqfs_dir_writer_begin);
  BERTH_LAZY_FUNCTION(libsquashfs(), dir_writer_add_entry, sqfs_dir_writer_add_entry);
  BERTH_LAZY_FUNCTION(libsquashfs(), dir_writer_end, sqfs_dir_writer_end);
  BERTH_LAZY_FUNCTION(libsquashfs(), dir_writer_create_inode, sqfs_dir_writer_create_inode);
  BERTH_LAZY_FUNCTION(libsquashfs(), inode_make_extended, sqfs_inode_make_extended);
  BERTH_LAZY_FUNCTION(libsquashfs(), inode_set_xattr_index, sqfs_inode_set_xattr_index);
  // Reading.
  BERTH_LAZY_FUNCTION(libsquashfs(), super_read, sqfs_super_read);
  BERTH_LAZY_FUNCTION(libsquashfs(), dir_reader_create, sqfs_dir_reader_create);
  BERTH_LAZY_FUNCTION(libsquashfs(), dir_reader_get_root_inode, sqfs_dir_reader_get_root_inode);
  BERTH_LAZY_FUNCTION(libsquashfs(), dir_reader_find_by_path, sqfs_dir_reader_find_by_path);
  BERTH_LAZY_FUNCTION(libsquashfs(), data_reader_create, sqfs_data_reader_create);
  BERTH_LAZY_FUNCTION(libsquashfs(), data_reader_load_fragment_table,
                      sqfs_data_reader_load_fragment_table);
  BERTH_LAZY_FUNCTION(libsquashfs(), data_reader_read, sqfs_data_reader_read);
  BERTH_LAZY_FUNCTION(libsquashfs(), inode_get_file_size, sqfs_inode_get_file_size);
  BERTH_LAZY_FUNCTION(libsquashfs(), id_table_read, sqfs_id_table_read);
  BERTH_LAZY_FUNCTION(libsquashfs(), dir_reader_get_full_hierarchy,
                      sqfs_dir_reader_get_full_hierarchy);
  BERTH_LAZY_FUNCTION(libsquashfs(), dir_tree_destroy, sqfs_dir_tree_destroy);
};

/// The functions, loading libsquashfs the first time.
const SqfsApi& sqfs_api();

/// Destroys a libsquashfs object (any sqfs_*_t) on scope exit.
struct SqfsDestroy {
  void operator()(void* obj) const { sqfs_destroy(obj); }
};
template <class T>
using SqfsPtr = std::unique_ptr<T, SqfsDestroy>;

/// Frees memory libsquashfs allocated (inodes it returned).
struct SqfsFree {
  void operator()(void* p) const { sqfs_api().free(p); }
};
using SqfsInodePtr = std::unique_ptr<sqfs_inode_generic_t, SqfsFree>;

}  // namespace berth

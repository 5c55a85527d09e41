/** freedesktop.org Trash specification 1.0 on Linux: trash, list and restore by rename only. */
export { moveToTrash, type MoveToTrashOptions, type RenameFn, type TrashedItem } from './move-to-trash.js';
export { listTrash, type TrashEntry, type TrashEntryOk, type TrashEntryBroken } from './list-trash.js';
export { restoreFromTrash, type RestoreOptions, type RestoreResult } from './restore-from-trash.js';
export { locateTrashItem, originalPathFor, type TrashItemLocation } from './trash-location.js';
export {
  findTrashDir,
  homeTrashDir,
  trashTopDir,
  type FindTrashDirOptions,
  type TrashDirChoice,
  type TrashKind,
} from './trash-dir.js';
export { encodeTrashPath, decodeTrashPath } from './path-encoding.js';
export { formatTrashInfo, parseTrashInfo, formatDeletionDate, parseDeletionDate, type TrashInfo } from './trash-info.js';
export { diskUsage, readDirectorySizes, type DirectorySizeEntry } from './directory-sizes.js';
export { findTopDir } from './mount-point.js';

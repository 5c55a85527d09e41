export { GitPlanNoticePlugin, PLUGIN_NAME, type GitPlanNoticeOptions } from './plugin.js';
export { execLines, noticeFor, optsStrategies, shown } from './notice.js';
export { STOPPED_STATES, gitDirOf, isGitDirectory, stateFolderAt, stateFoldersOf, stoppedOperationsAround } from './state.js';
export { commonDirOf, dotGitAt, linkedWorkTreeOf, lstatQuietly, repositoryGitDirs } from './repositories.js';

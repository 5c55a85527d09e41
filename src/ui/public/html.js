// htm turns tagged templates into Preact elements: JSX without a build step.
import { h } from 'preact';
import htm from 'htm';

export const html = htm.bind(h);

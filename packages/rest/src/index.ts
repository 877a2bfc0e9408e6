export { DecodeError, decodeObject, decodeParams } from './decode.ts';
export {
  enumValueName,
  isInternal,
  isListResponse,
  type Json,
  type JsonObject,
  objectName,
  render,
  renderList,
} from './render.ts';
